# Passes when the change is there and the answer reports the check's real output.
[ "$(cat status.txt 2>/dev/null)" = "ready $MARKER" ] && grep -q "CHECK OK" "$ANSWER_FILE"
