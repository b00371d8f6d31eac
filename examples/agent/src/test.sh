#!/bin/sh
# test.sh: checks wordcount.sh on a two-line file of five words.
printf 'the quick brown\nfox jumps\n' > sample.txt
got=$(sh wordcount.sh sample.txt)
if [ "$got" = 5 ]; then
  echo "ok: wordcount.sh sample.txt = 5"
else
  echo "FAIL: wordcount.sh sample.txt = $got, expected 5"
  exit 1
fi
