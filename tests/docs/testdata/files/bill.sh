#!/bin/sh
# The user's billing job of README "Locks, leader election and
# membership": it runs while `lockctl lock /demo/locks/billing` holds the
# lock and gets the lock's fencing token in LOCK_TOKEN.
if [ -z "$LOCK_TOKEN" ]; then
  echo "bill.sh: no LOCK_TOKEN" >&2
  exit 1
fi
echo "billing: writing under token $LOCK_TOKEN"
