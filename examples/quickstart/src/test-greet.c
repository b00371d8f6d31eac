/* test-greet.c: prints one TAP line per check; exits 1 if any fails. */
#include <stdio.h>
#include <string.h>

#include "greet.h"

static int failed, n;

static void
check (const char *what, int ok)
{
  printf ("%s %d - %s\n", ok ? "ok" : "not ok", ++n, what);
  failed |= !ok;
}

int
main (void)
{
  char buf[64];

  greet (buf, sizeof buf, "make");
  check ("greets by name", strcmp (buf, "Hello, make!") == 0);
  greet (buf, sizeof buf, "");
  check ("greets the world without a name", strcmp (buf, "Hello, world!") == 0);
  check ("reports the length it needed", greet (buf, 4, "sandbox") == 15 && strlen (buf) == 3);
  printf ("1..%d\n", n);
  return failed;
}
