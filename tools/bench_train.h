/*
 * bench_train.h - shemb-bench train: a training step loop over N local
 * ranks, libshemb's sharded exchange against two baselines on the same
 * transport, in the same processes:
 *   dense      every rank holds every table; each step all-reduces each
 *              table's full gradient (Horovod's sparse_as_dense);
 *   allgather  every rank holds every table; each step all-gathers every
 *              rank's (id, gradient row) pairs, one per id occurrence
 *              (Horovod's sparse gradients), and applies them all.
 * The parent (bench_train.c) starts the ranks with shemb-run and reads the
 * lines they print that start with TRAIN_TAG.
 */
#ifndef SHEMB_BENCH_TRAIN_H
#define SHEMB_BENCH_TRAIN_H

/*
 * Lines from rank 0, for the parent:
 *   @train step MODE SECONDS SENT RECEIVED   per timed step: the
 *                                    slowest rank's time, the mean bytes a
 *                                    rank sent and received
 *   @train balance PLAN MAX MEAN     bytes per rank (sent and received)
 *                                    of a Zipf 1.2 table in PLAN
 *   @train plan TEXT                 the plan AUTO chose, a table a line
 */
#define TRAIN_TAG "@train"

enum { TRAIN_OURS, TRAIN_DENSE, TRAIN_ALLGATHER, TRAIN_NMODES };

extern const char *const train_mode_names[TRAIN_NMODES];

extern const char bench_train_usage[];

int bench_train(int argc, char **argv);
int bench_train_rank(int argc, char **argv);

#endif
