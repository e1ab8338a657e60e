/*
 * basic.c - one training step on one table, checked by hand.
 *
 * Rows 3, 5 and 7 of a 10 x 4 table hold id + column / 4.  Two
 * bags, { 3, 5 } and { 5, 7, 7 }, are summed; the loss is half the
 * sum of the squares of the pooled values, so its gradient is the
 * pooled values themselves; SGD with lr 0.25 then updates each
 * distinct row once.  All these numbers are exact in binary floating
 * point, so the results are compared with ==.
 */
#include <shemb.h>
#include <stdint.h>
#include <stdio.h>

#define ROWS 10
#define DIM 4
#define LR 0.25f

static int failed(shemb_ctx *ctx, int rc, const char *what)
{
    if (rc == SHEMB_OK)
        return 0;
    fprintf(stderr, "%s: %s: %s\n", what, shemb_strerror(rc),
            shemb_ctx_last_error(ctx));
    return 1;
}

int main(void)
{
    struct shemb_ctx_attr cattr;
    struct shemb_table_attr tattr;
    struct shemb_bags bags;
    shemb_ctx *ctx = NULL;
    shemb_table *table = NULL;
    /* the rows we set, and their values */
    const int64_t row_ids[3] = { 3, 5, 7 };
    float rows[3][DIM], after[3][DIM];
    /* two bags in CSR form: { 3, 5 } and { 5, 7, 7 } */
    const int64_t offsets[3] = { 0, 2, 5 };
    const int64_t ids[5] = { 3, 5, 5, 7, 7 };
    const int64_t bad_ids[2] = { 3, 100 };
    float out[2][DIM], grad[2][DIM];
    float *outs[1] = { &out[0][0] };
    const float *grads[1] = { &grad[0][0] };
    int status = 1, rc;

    printf("libshemb %s\n", shemb_version_string());

    shemb_ctx_attr_init(&cattr);
    cattr.nthreads = 2;
    rc = shemb_ctx_create(&cattr, &ctx);
    if (failed(NULL, rc, "shemb_ctx_create"))
        return 1;

    shemb_table_attr_init(&tattr);
    tattr.name = "emb";
    tattr.rows = ROWS;
    tattr.dim = DIM;
    tattr.optimizer = SHEMB_OPT_SGD;
    tattr.lr = LR;
    rc = shemb_table_create(ctx, &tattr, &table);
    if (failed(ctx, rc, "shemb_table_create"))
        goto out;

    for (int r = 0; r < 3; r++)
        for (int c = 0; c < DIM; c++)
            rows[r][c] = (float)row_ids[r] + (float)c / 4;
    rc = shemb_table_write_rows(table, 3, row_ids, rows, SHEMB_F32, 0);
    if (failed(ctx, rc, "shemb_table_write_rows"))
        goto out;

    /* forward: SUM pooling, keeping the plan for the backward */
    shemb_bags_init(&bags);
    bags.table = table;
    bags.pooling = SHEMB_POOL_SUM;
    bags.dim = DIM;
    bags.nbags = 2;
    bags.offsets = offsets;
    bags.nids = 5;
    bags.ids = ids;
    rc = shemb_lookup(ctx, 1, &bags, outs, 0);
    if (failed(ctx, rc, "shemb_lookup"))
        goto out;
    for (int c = 0; c < DIM; c++) {
        if (out[0][c] != rows[0][c] + rows[1][c] ||
            out[1][c] != rows[1][c] + rows[2][c] + rows[2][c]) {
            fprintf(stderr, "lookup: column %d is wrong\n", c);
            goto out;
        }
    }
    printf("bag 0 = { 3, 5 }    sums to %g %g %g %g\n",
           out[0][0], out[0][1], out[0][2], out[0][3]);
    printf("bag 1 = { 5, 7, 7 } sums to %g %g %g %g\n",
           out[1][0], out[1][1], out[1][2], out[1][3]);

    /* loss = sum of out[b][c]^2 / 2, so d loss / d out = out */
    for (int b = 0; b < 2; b++)
        for (int c = 0; c < DIM; c++)
            grad[b][c] = out[b][c];

    /* backward: per distinct row, sum the gradients of its
     * positions, then one SGD step: row 3 gets grad[0], row 5
     * grad[0] + grad[1], row 7 grad[1] + grad[1] */
    rc = shemb_backward(ctx, 1, &bags, grads);
    if (failed(ctx, rc, "shemb_backward"))
        goto out;
    rc = shemb_table_read_rows(table, 3, row_ids, after, SHEMB_F32);
    if (failed(ctx, rc, "shemb_table_read_rows"))
        goto out;
    for (int c = 0; c < DIM; c++) {
        float g3 = grad[0][c];
        float g5 = grad[0][c] + grad[1][c];
        float g7 = grad[1][c] + grad[1][c];

        if (after[0][c] != rows[0][c] - LR * g3 ||
            after[1][c] != rows[1][c] - LR * g5 ||
            after[2][c] != rows[2][c] - LR * g7) {
            fprintf(stderr, "backward: column %d is wrong\n", c);
            goto out;
        }
    }
    printf("after one SGD step, row 5 = %g %g %g %g\n",
           after[1][0], after[1][1], after[1][2], after[1][3]);

    /* a bad id is rejected, and nothing changes */
    bags.nbags = 1;
    bags.nids = 2;
    bags.ids = bad_ids;
    rc = shemb_lookup(ctx, 1, &bags, outs, SHEMB_LOOKUP_NO_GRAD);
    if (rc != SHEMB_EINVAL) {
        fprintf(stderr, "a bad id was not rejected (%d)\n", rc);
        goto out;
    }
    printf("rejected: %s\n", shemb_ctx_last_error(ctx));
    status = 0;

out:
    shemb_table_destroy(table);
    shemb_ctx_destroy(ctx);
    return status;
}
