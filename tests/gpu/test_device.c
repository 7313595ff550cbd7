/* The `device` option → backend (gpu/backend_select.c), on every machine, with or without CUDA:
 *  - cpu is the CPU; a malformed device is refused with the accepted forms;
 *  - auto is CUDA device 0 when this build has CUDA and the driver reports a device, else the CPU
 *    with a note saying why;
 *  - cuda:N is never replaced by the CPU: without CUDA in the build, without a device, or with N
 *    past the last device it is an error that says which;
 *  - a reduced precision on the CPU is noted as not applying;
 *  - in a CUDA build on a machine with an NVIDIA device node or driver (tests/gpu/nvidia_device.h),
 *    CUDA finds a device: a driver that cannot initialise fails here instead of passing as "no GPU". */
#include "backend_cuda.h"
#include "backend_select.h"
#include "nvidia_device.h"
#include "test_util.h"

int main(void) {
    char note[1024];
    pgcl_backend *b = pgcl_backend_open("cpu", "fp32", note, sizeof note);
    CHECK(b && strcmp(pgcl_backend_kind(b), "cpu") == 0 && note[0] == 0, "cpu: note '%s'", note);
    pgcl_backend_destroy(b);

    b = pgcl_backend_open("cpu", "bf16", note, sizeof note);
    CHECK(b && strstr(note, "device-precision bf16 applies only to CUDA"), "cpu bf16: note '%s'", note);
    pgcl_backend_destroy(b);

    const char *bad[] = {"gpu", "cuda", "cuda:", "cuda:-1", "cuda:1x", "CPU", "cuda:99999", ""};
    for (int i = 0; i < (int)(sizeof bad / sizeof bad[0]); i++) {
        b = pgcl_backend_open(bad[i], "fp32", note, sizeof note);
        CHECK(b == NULL && strstr(note, "must be auto, cpu or cuda:N"), "'%s' refused: '%s'", bad[i], note);
        pgcl_backend_destroy(b);
    }

    int devices = 0;
    char why[512] = "built without CUDA";
#ifdef PGCLD_HAVE_CUDA
    CHECK(pgcl_backend_have_cuda(), "PGCLD_HAVE_CUDA and pgcl_backend_have_cuda() agree");
    devices = pgcl_cuda_device_count(why, sizeof why);
    CHECK(devices > 0 || why[0], "no device and no reason");
    const char *evidence = nvidia_device_evidence();
    CHECK(devices > 0 || evidence == NULL, "%s is present, but CUDA finds no usable device: %s", evidence, why);
#else
    CHECK(!pgcl_backend_have_cuda(), "PGCLD_HAVE_CUDA and pgcl_backend_have_cuda() agree");
#endif
    printf("CUDA in this build: %s; devices: %d%s%s\n", pgcl_backend_have_cuda() ? "yes" : "no", devices,
           devices ? "" : "; ", devices ? "" : why);

    b = pgcl_backend_open("auto", "fp32", note, sizeof note);
    CHECK(b != NULL, "auto always serves: '%s'", note);
    if (b) {
        printf("auto: %s%s%s\n", pgcl_backend_name(b), note[0] ? "; " : "", note);
        CHECK(strcmp(pgcl_backend_kind(b), devices > 0 ? "cuda" : "cpu") == 0, "auto chose %s with %d devices",
              pgcl_backend_kind(b), devices);
        if (devices == 0) CHECK(strstr(note, "serving on the CPU") != NULL, "auto says why: '%s'", note);
    }
    pgcl_backend_destroy(b);

    b = pgcl_backend_open("cuda:0", "fp32", note, sizeof note);
    if (devices > 0) {
        CHECK(b && strcmp(pgcl_backend_kind(b), "cuda") == 0, "cuda:0 with a device: '%s'", note);
    } else {
        CHECK(b == NULL, "cuda:0 without a device must not fall back to the CPU");
        CHECK(strstr(note, pgcl_backend_have_cuda() ? "cuda:0: " : "built without CUDA") != NULL, "cuda:0: '%s'",
              note);
        printf("cuda:0: %s\n", note);
    }
    pgcl_backend_destroy(b);

    b = pgcl_backend_open("cuda:1023", "fp32", note, sizeof note);
    CHECK(b == NULL && note[0], "cuda:1023 is past the last device: '%s'", note);
    if (devices > 0) CHECK(strstr(note, "no such device") != NULL, "says so: '%s'", note);
    pgcl_backend_destroy(b);
    return test_finish("test_device");
}
