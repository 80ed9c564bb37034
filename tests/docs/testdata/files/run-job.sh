#!/bin/sh
# The user's nightly job of README "Locks, leader election and membership":
# it runs while `lockctl lock /demo/locks/nightly` holds the lock and gets
# the lock's fencing token in LOCK_TOKEN, to send with its writes.
if [ -z "$LOCK_TOKEN" ]; then
  echo "run-job.sh: no LOCK_TOKEN" >&2
  exit 1
fi
echo "nightly job: writing under token $LOCK_TOKEN"
