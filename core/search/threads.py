"""How many threads the BLAS library (numpy's matrix product: the exact vector scan) may use.

OpenBLAS starts one thread per core and hands each a slice of every product. For one query
vector against a few thousand passages the work is microseconds, so the threads only cost their
wake-ups, and when the host is busy a product waits for a thread the scheduler has not run: one
`matrix @ q` on 1,252 passages took 56 ms with the default threads under load and 0.08 ms with
one. `search.blas_threads` caps them for the whole process (threadpoolctl, which speaks to
OpenBLAS, MKL and BLIS alike); 0 leaves the library's default."""

from __future__ import annotations


def limit_blas_threads(threads: int) -> None:
    if threads > 0:
        from threadpoolctl import threadpool_limits  # 12 ms to import: only when it is used

        threadpool_limits(limits=threads, user_api="blas")
