# sh waitfor.sh FILE REGEXP: waits (up to 60 s) until a line of FILE
# matches the extended REGEXP.
i=0
until grep -Eq -- "$2" "$1" 2>/dev/null; do
	i=$((i+1))
	if [ $i -gt 1200 ]; then
		echo "waitfor: no line matching $2 in $1 within 60s; it has:" >&2
		cat "$1" >&2
		exit 1
	fi
	sleep 0.05
done
