if [ "$(cat status.txt 2>/dev/null)" = "ready {marker}" ]; then
  echo "CHECK OK"
else
  echo "CHECK FAILED"
  exit 1
fi
