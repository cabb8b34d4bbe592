#!/bin/sh
# as_test_user.sh CMD...: runs CMD as the unprivileged user execbox-test, without capabilities.
# The VM stage (tests/vm) sets EXECBOX_TEST_DELEGATE to start it in a cgroup delegated to that
# user, the way systemd starts a unit with Delegate=yes.
# shellcheck disable=SC2086
exec ${EXECBOX_TEST_DELEGATE:-} /usr/bin/setpriv --reuid=execbox-test --regid=execbox-test --clear-groups \
  --inh-caps=-all -- "$@"
