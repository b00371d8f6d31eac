#!/bin/sh
# wordcount.sh FILE: prints the number of words in FILE.
wc -l < "$1" | tr -d ' '
