# sh bg.sh NAME ARGS...: runs mcplhost ARGS, its stderr to NAME.err and its
# pid in NAME.pid; when it ends, prints its stdout and "[exit N]" on
# stdout and its stderr on stderr.
name=$1; shift
mcplhost "$@" >$name.out 2>$name.err &
pid=$!
echo $pid >$name.pid.new && mv $name.pid.new $name.pid
# If the script is cut short (testscript interrupts what is left in the
# background), stop the run in order, so that it leaves no server behind.
trap 'kill -INT $pid; wait $pid' INT TERM
wait $pid
code=$?
cat $name.out
echo "[exit $code]"
cat $name.err >&2
