/* End to end on real data: Fashion-MNIST (Debian's dataset-fashion-mnist), pixels x/255 as
 * torchvision's ToTensor gives them. The bars: the MLP 784-256-10 reaches >= 0.85 test accuracy
 * after one epoch, and a small CNN (2 conv + pool) >= 0.88 after two.
 *
 * Recipe: Adam, lr 2e-3, batch 32, the learning rate annealed to 0 over the run (cosine). Why not the
 * plain defaults (Adam 1e-3, batch 64, constant): one epoch with a constant rate ends on noisy weights.
 * PyTorch with exactly those settings gets MLP 0.842 on average over 10 seeds (0.827..0.850) and CNN
 * 0.877 (0.874..0.882), and ringside the same (0.843, 0.879), so the bars would fail at random for a
 * correct engine. Measured with ringside over seeds 0..3 (MLP) and 0..2 (CNN), 1 epoch / 2 epochs:
 *   constant lr 1e-3, batch 32:       MLP 0.836 0.857 0.852 0.853       CNN 0.891 0.881 0.879
 *   constant lr 1e-3, batch 16:       MLP 0.854 0.835 0.851 0.856
 *   cosine  lr 1e-3, batch 32:        MLP 0.849 0.848 0.851 0.847       CNN 0.882 0.883
 *   cosine  lr 2e-3, batch 64:        MLP 0.853 0.852 0.853 0.852
 *   cosine  lr 2e-3, batch 32:        MLP 0.860 0.859 0.860 0.859       CNN 0.897 0.896 0.892
 * Annealing removes most of the seed-to-seed spread; the last row is the recipe, 0.009 and 0.012 above
 * the bars at its worst seed. A broken gradient, optimizer, loader or initialisation shows as an
 * accuracy far below. tests/engine/train/fashion_torch_ref.py reproduces the PyTorch figures.
 * Skipped (exit 77) where the package is not installed. */
#include <string.h>

#include "engine/cpu/blas.h"
#include "engine/data/data.h"
#include "engine/nn/spec.h"
#include "engine/train/train.h"
#include "tests/rs_test.h"

static void on_event(void *ud, const rs_train_event *ev)
{
    (void)ud;
    if (ev->kind == RS_TRAIN_EV_EPOCH)
        printf("    epoch %d/%d: train loss %.4f acc %.4f, %.0f samples/s (data %.1fs fwd %.1fs bwd %.1fs opt %.1fs)\n",
               ev->epoch + 1, ev->epochs, ev->epoch_loss, ev->epoch_acc, ev->samples_per_s, ev->t_data, ev->t_fwd,
               ev->t_bwd, ev->t_opt);
    if (ev->kind == RS_TRAIN_EV_EVAL)
        printf("    epoch %d/%d: test loss %.4f acc %.4f\n", ev->epoch + 1, ev->epochs, ev->test_loss, ev->test_acc);
    fflush(stdout);
}

static void run(const rs_data_pair *d, const char *spec, int epochs, double want, double torch_mean)
{
    rs_model *m = NULL;
    rs_err e = {0};
    printf("%s, %d epoch(s), adam lr 2e-3, batch 32, cosine to 0:\n", spec, epochs);
    RS_CHECK(rs_model_parse(spec, "m", rs_device_cpu(), NULL, 0, &m, NULL, &e) == RS_OK, "%s: %s", spec, e.msg);
    if (!m) return;
    rs_train_cfg c = rs_train_defaults();
    c.epochs = epochs;
    c.batch = 32;
    c.opt.lr = 2e-3f;
    c.sched.kind = RS_SCHED_COSINE; /* total 0: anneal over the whole run */
    rs_train_hooks h = {.on_event = on_event};
    rs_train_result r;
    rs_status st = rs_train(m, d, &c, &h, &r, &e);
    RS_CHECK(st == RS_OK, "train %s: %s", spec, e.msg);
    if (st == RS_OK) {
        printf("  => test accuracy %.4f (want >= %.3f; PyTorch with constant lr 1e-3, batch 64: %.3f), test loss %.4f, %.1f s, %.0f samples/s\n",
               r.test_acc, want, torch_mean, r.test_loss, r.seconds, r.samples_per_s);
        RS_CHECK(r.epochs_done == epochs && r.steps == (int64_t)epochs * 1875, "%d epochs, %lld steps", r.epochs_done,
                 (long long)r.steps);
        RS_CHECK(r.test_acc >= want, "%s: test accuracy %.4f after %d epoch(s), want >= %.3f (PyTorch, constant lr 1e-3 batch 64: %.3f)", spec,
                 r.test_acc, epochs, want, torch_mean);
        /* The figure rs_train reports is the one rs_evaluate gives now. */
        double acc = -1, loss = -1;
        RS_CHECK(rs_evaluate(m, d->test, 1000, &acc, &loss, &e) == RS_OK, "%s", e.msg);
        RS_CHECK(acc == r.test_acc, "rs_evaluate %.6f vs the run's %.6f", acc, r.test_acc);
        RS_CHECK_CLOSE(loss, r.test_loss, 1e-5, 1e-5, "test loss with batch 1000 vs the run's batch");
    }
    rs_model_free(m);
}

int main(int argc, char **argv)
{
    (void)argc;
    rs_blas_prefer_fast_kernel(argv);
    rs_blas_info bi;
    rs_blas_get_info(&bi);
    printf("OpenBLAS kernel %s (%s), %d threads\n", bi.core, bi.why, bi.threads);
    rs_data_pair d = {0};
    rs_err e = {0};
    rs_status st = rs_data_fashion(NULL, &d, &e);
    if (st == RS_ERR_IO && strstr(e.msg, "apt-get")) RS_SKIP("%s", e.msg);
    RS_CHECK(st == RS_OK, "fashion: %s", e.msg);
    if (st != RS_OK) return rs_test_finish("engine-fashion-train");
    run(&d, "mlp 784-256-10", 1, 0.85, 0.842);
    run(&d, "seq in=1x28x28 conv(16,3,pad=1) relu maxpool(2) conv(32,3,pad=1) relu maxpool(2) flatten linear(10)", 2,
        0.88, 0.877);
    rs_data_pair_clear(&d);
    return rs_test_finish("engine-fashion-train");
}
