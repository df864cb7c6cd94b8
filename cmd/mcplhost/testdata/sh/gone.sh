# sh gone.sh PIDFILE: waits (up to 10 s) until the process is gone (or a
# zombie no one has reaped yet).
pid=$(cat $1)
i=0
while s=$(cut -d' ' -f3 /proc/$pid/stat 2>/dev/null) && [ "$s" != Z ]; do
	i=$((i+1))
	if [ $i -gt 200 ]; then
		echo "process $pid from $1 is still running (state $s)" >&2
		exit 1
	fi
	sleep 0.05
done
