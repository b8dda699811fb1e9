"""Developer tools kept with the tests: build comparison (`compare_builds`), the lock (`lock`), the GPU
check (`gpu_check.sh`) and the host-statistics benchmark against the frozen baseline (`bench_stats`)."""
