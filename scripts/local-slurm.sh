#!/usr/bin/env bash
# A single-node Slurm on localhost, for slurp's backend tests and for
# trying `--backend slurm` on a laptop.
#
#   scripts/local-slurm.sh start    install (Debian packages) if needed, configure, start
#   scripts/local-slurm.sh stop     stop the daemons
#   scripts/local-slurm.sh status   what sinfo says
#
# Needs root (or sudo) and no systemd: munged, slurmctld and slurmd are started as
# plain daemons. The node is `localhost` at 127.0.0.1 with this machine's CPUs (at least
# 8, oversubscribed if the machine has fewer) and a little less than its memory; the
# machine's hostname does not matter. `start` on a running Slurm reconfigures it.
set -euo pipefail

SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
CONF=/etc/slurm/slurm.conf
RUN=/run/slurp-local-slurm

install() {
    local need=()
    for cmd in slurmctld slurmd sbatch munged; do
        command -v "$cmd" >/dev/null || need=(slurmctld slurmd slurm-client munge)
    done
    [ ${#need[@]} -eq 0 ] && return
    echo "local-slurm: installing ${need[*]}" >&2
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
}

# Whether PID is a live process (a zombie is gone: PID 1 may reap late here).
alive() {
    [ -n "${1:-}" ] && [ -r "/proc/$1/stat" ] && [ "$(cut -d' ' -f3 < "/proc/$1/stat")" != Z ]
}

configure() {
    local cpus mem
    # At least 8 CPUs, as the proof of concept's examples assume: Slurm takes
    # the configured count as is (config_overrides) and oversubscribes.
    cpus=$(nproc)
    [ "$cpus" -ge 8 ] || cpus=8
    mem=$(( $(free -m | awk '/^Mem:/ {print $2}') * 9 / 10 ))
    $SUDO mkdir -p /etc/slurm /var/spool/slurmctld /var/spool/slurmd /var/log/slurm "$RUN"
    local new
    new=$(mktemp)
    cat > "$new" <<CONF
# Written by slurp's scripts/local-slurm.sh: one node, localhost.
ClusterName=slurp-local
SlurmctldHost=localhost
AuthType=auth/munge
SlurmUser=root
SlurmctldPidFile=$RUN/slurmctld.pid
SlurmdPidFile=$RUN/slurmd.pid
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd.log
# Works in any container (no cgroup plugins needed).
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
# Cores and memory are consumable; without a default every job would take the whole
# node's memory and jobs would run one at a time.
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
DefMemPerCPU=256
# Start queued batch jobs at once, not every 3 s.
SchedulerParameters=batch_sched_delay=0
# A job that can never fit is refused at submission, not left pending forever.
EnforcePartLimits=ALL
# No slurmdbd: finished jobs stay visible to scontrol for 5 minutes, and a text file
# records each one's end.
JobCompType=jobcomp/filetxt
JobCompLoc=/var/log/slurm/jobcomp.log
MinJobAge=300
MailProg=/bin/true
ReturnToService=2
SlurmdParameters=config_overrides
NodeName=localhost NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$mem State=UNKNOWN
PartitionName=debug Nodes=localhost Default=YES MaxTime=INFINITE State=UP
CONF
    # A changed configuration needs the daemons restarted.
    if ! cmp -s "$new" "$CONF"; then
        stop
        $SUDO cp "$new" "$CONF"
    fi
    rm -f "$new"
}

start_munge() {
    if [ ! -s /etc/munge/munge.key ]; then
        $SUDO runuser -u munge -- mungekey --create >/dev/null 2>&1 || $SUDO mungekey --create
        $SUDO chown munge:munge /etc/munge/munge.key
    fi
    $SUDO mkdir -p /run/munge
    $SUDO chown munge:munge /run/munge
    if ! munge -n 2>/dev/null | unmunge >/dev/null 2>&1; then
        $SUDO runuser -u munge -- munged --force
    fi
    for _ in $(seq 50); do
        munge -n 2>/dev/null | unmunge >/dev/null 2>&1 && return
        sleep 0.1
    done
    echo "local-slurm: munged did not come up" >&2
    exit 1
}

start() {
    install
    configure
    start_munge
    alive "$(cat "$RUN/slurmctld.pid" 2>/dev/null)" || $SUDO slurmctld -c
    alive "$(cat "$RUN/slurmd.pid" 2>/dev/null)" || $SUDO slurmd -N localhost
    for _ in $(seq 150); do
        case "$(sinfo -h -N -o %T 2>/dev/null)" in
            idle|mixed|allocated) echo "local-slurm: localhost is up ($(sinfo -h -N -o %c) CPUs)" >&2; return ;;
        esac
        sleep 0.2
    done
    echo "local-slurm: the node did not become idle; see /var/log/slurm/" >&2
    sinfo -N >&2 || true
    exit 1
}

stop() {
    for daemon in slurmd slurmctld; do
        local pid
        pid=$(cat "$RUN/$daemon.pid" 2>/dev/null || true)
        if alive "$pid"; then
            $SUDO kill "$pid"
            for _ in $(seq 50); do alive "$pid" || break; sleep 0.1; done
        fi
    done
}

case "${1:-}" in
    start) start ;;
    stop) stop ;;
    status) sinfo -N ;;
    *) echo "usage: $0 start|stop|status" >&2; exit 2 ;;
esac
