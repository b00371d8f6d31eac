#!/usr/bin/env bash
# bench/s3-multipart-floor.sh CURL-CONFIG URL PARTS-DIR IN-FLIGHT
#
# The floor of a multipart upload without checksums on an S3 server: the
# requests an `s3://` export makes (CreateMultipartUpload, an UploadPart per
# file of PARTS-DIR, IN-FLIGHT at once, CompleteMultipartUpload), sent by
# curl --aws-sigv4 from parts split beforehand, with UNSIGNED-PAYLOAD: no
# client reads, hashes or spools anything while it runs, so its time is the
# server's.  URL: http://HOST:PORT/BUCKET/KEY.  CURL-CONFIG holds the key
# (user = "ID:SECRET"), off the command line.
set -euo pipefail
cfg=$1 url=$2 parts=$3 in_flight=$4
sign=(-sS -f -K "$cfg" --aws-sigv4 aws:amz:us-east-1:s3 -H 'x-amz-content-sha256: UNSIGNED-PAYLOAD')
# curl 7.88 signs a bare "?uploads" differently from S3; "uploads=" is the same query to S3.
id=$(curl "${sign[@]}" -X POST "$url?uploads=" | sed -n 's|.*<UploadId>\(.*\)</UploadId>.*|\1|p')
[ -n "$id" ] || { echo "s3-multipart-floor: no UploadId from $url" >&2; exit 1; }
args=() n=0
for part in "$parts"/*; do
  n=$((n + 1))
  args+=(-T "$part" "$url?partNumber=$n&uploadId=$id")
done
# Each transfer's part number and ETag, in whatever order they end.
curl "${sign[@]}" --no-progress-meter -Z --parallel-max "$in_flight" -o /dev/null -w '%{url} %header{etag}\n' "${args[@]}" \
  | sed -n 's|.*partNumber=\([0-9]*\)&.* \(.*\)|\1 \2|p' | sort -n \
  | awk 'BEGIN {printf "<CompleteMultipartUpload>"}
         {printf "<Part><PartNumber>%d</PartNumber><ETag>%s</ETag></Part>", $1, $2}
         END {printf "</CompleteMultipartUpload>"}' > "$parts.xml"
curl "${sign[@]}" -o /dev/null -H 'Content-Type: application/xml' -X POST --data-binary @"$parts.xml" \
  "$url?uploadId=$id"
