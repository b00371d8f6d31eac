/* greet.h: the code under test. */
#pragma once

/* Writes "Hello, NAME!" into @buf (at most @size bytes); returns the length it needed. */
int greet (char *buf, unsigned long size, const char *name);
