#!/bin/sh
# One step of adaptive.slurp: halve the error left by the step before (a
# stand-in for a simulation), and submit the next step while it is above
# the tolerance.
n=$1
error=$(cat error 2>/dev/null || echo 1000)
error=$((error / 2))
echo "$error" > error
echo "step $n: error $error"
if [ "$error" -gt 100 ]; then
    next=$((n + 1))
    slurp submit "task step$next after=step$n: sh step.sh $next" > /dev/null
fi
