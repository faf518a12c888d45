#!/bin/sh
# The canonical health check's time for 1, 2, 4 and 8 fake GPUs (issue 24, part 5), with the
# programs of a build folder; writes bench/results/health-scale-fake.txt.
#   bench/health-scale-run.sh [BUILD]        (default: build)
set -eu
b=${1:-build}
out=bench/results/health-scale-fake.txt
{
	echo "# command: bench/health-scale-run.sh $b  (build $(git describe --always --dirty))"
	echo "# load average before: $(cut -d" " -f1-3 /proc/loadavg) (a 2-CPU machine shared by four builds)"
	/usr/bin/python3 bench/health-scale.py --umd "$b/umd" --worker "$b/kernels/umd-worker" \
		--umdctl "$b/client/umdctl" --gpus 1,2,4,8 --runs 5
} | tee "$out"
