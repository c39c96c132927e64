# Run in a guest whose only cgroup hierarchy is v2 (scripts/cgroup-v2-vm.sh),
# as root; tests/memory.rs reads what it prints.
cg=/sys/fs/cgroup
printf 'task big mem=64M retries=1: hog 400\ntask small mem=64M: hog 16\n' > flow.slurp

echo "--- pace"
# How long `hog 400` takes in this guest with nothing to stop it: the
# killed attempts below must end well before that (an emulated guest's
# pace depends on how busy its host is).
printf 'task free: hog 400\n' > pace.slurp
slurp --joblog jl-pace pace.slurp > /dev/null 2>&1
echo "rc=$?"
cat jl-pace

echo "--- root"
slurp resources | grep limits
slurp --joblog jl-root flow.slurp > out 2>&1
echo "rc=$?"
cat out
cat jl-root
echo "left: $(ls -d $cg/slurp-* 2>/dev/null | wc -l)"
echo "root subtree: [$(cat $cg/cgroup.subtree_control)]"

echo "--- delegated"
# What a delegating parent (systemd, a batch system) does: memory for the
# children of the root, a cgroup that holds slurp alone.
echo +memory > $cg/cgroup.subtree_control
mkdir $cg/job
sh -c "echo \$\$ > $cg/job/cgroup.procs; exec slurp resources" | grep limits
# A task without mem= starts first: it must not keep slurp from handing
# memory down (slurp finds its mechanism before any task starts).
{ echo "task first: sleep 0.3"; cat flow.slurp; } > job.slurp
sh -c "echo \$\$ > $cg/job/cgroup.procs; exec slurp --joblog jl-job job.slurp" > out 2>&1
echo "rc=$?"
cat out
cat jl-job
echo "job subtree: [$(cat $cg/job/cgroup.subtree_control)]"
echo "job left: $(ls -d $cg/job/slurp-* 2>/dev/null | wc -l)"
echo "job procs: $(cat $cg/job/cgroup.procs | wc -l)"

echo "--- shared"
mkdir $cg/session
sh -c "echo \$\$ > $cg/session/cgroup.procs; exec sleep 100" &
sleeper=$!
sleep 1
sh -c "echo \$\$ > $cg/session/cgroup.procs; exec slurp resources" | grep limits
echo "session subtree: [$(cat $cg/session/cgroup.subtree_control)]"
echo "session left: $(ls -d $cg/session/slurp-* 2>/dev/null | wc -l)"
kill $sleeper
echo "--- end"
