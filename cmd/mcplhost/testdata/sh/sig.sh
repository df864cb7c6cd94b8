# sh sig.sh SIGNAL NAME: sends SIGNAL to bg.sh NAME's mcplhost.
kill -$1 $(cat $2.pid)
