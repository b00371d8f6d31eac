/* greet.c: the code under test. */
#include <stdio.h>

#include "greet.h"

int
greet (char *buf, unsigned long size, const char *name)
{
  return snprintf (buf, size, "Hello, %s!", name && *name ? name : "world");
}
