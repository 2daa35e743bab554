/*
 * test_e2e_harness.c - checks the checks: the end-to-end harness must notice
 * a sanitizer report in a daemon's log and a bad exit status, or every other
 * e2e test could pass over a broken daemon. Uses fake logs and /bin/false-like
 * exits, so it needs no daemon of its own.
 */
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "harness.h"

static void write_log(pdi_daemon *d, const char *text)
{
    FILE *f = fopen(d->log_path, "w");
    assert_non_null(f);
    fputs(text, f);
    assert_int_equal(fclose(f), 0);
}

/* The harness prints a failing daemon's log to stderr; the fake reports
 * here would only alarm whoever reads the test output, so stderr goes to
 * /dev/null while they are checked. */
static int stderr_saved = -1;

static void quiet(int on)
{
    fflush(stderr);
    if (on) {
        stderr_saved = dup(2);
        int devnull = open("/dev/null", O_WRONLY);
        assert_true(stderr_saved >= 0 && devnull >= 0);
        dup2(devnull, 2);
        close(devnull);
    } else if (stderr_saved >= 0) {
        dup2(stderr_saved, 2);
        close(stderr_saved);
        stderr_saved = -1;
    }
}

/* Teardown: stderr back even when a check failed inside the quiet part. */
static int restore_stderr(void **state)
{
    (void)state;
    quiet(0);
    return 0;
}

static void test_sanitizer_reports_are_caught(void **state)
{
    (void)state;
    quiet(1);
    pdi_daemon d;
    memset(&d, 0, sizeof d);
    snprintf(d.log_path, sizeof d.log_path, "/tmp/pathd-integ-harness-%d.log", (int)getpid());
    static const char *const reports[] = {
        "==1==ERROR: AddressSanitizer: heap-use-after-free on address 0x6020",
        "pd_server.c:42:7: runtime error: signed integer overflow",
        "WARNING: ThreadSanitizer: data race (pid=1)",
        "==1==ERROR: LeakSanitizer: detected memory leaks",
    };
    for (size_t i = 0; i < sizeof reports / sizeof reports[0]; i++) {
        char text[512];
        snprintf(text, sizeof text, "2026-01-01T00:00:00.000Z INFO listening on 127.0.0.1:1\n%s\n", reports[i]);
        write_log(&d, text);
        assert_true(pdi_log_has_sanitizer_report(&d));
        /* A clean exit status does not excuse the report. */
        d.exit_status = 0;
        assert_int_equal(pdi_daemon_check_exit(&d), -1);
    }
    write_log(&d, "2026-01-01T00:00:00.000Z INFO listening on 127.0.0.1:1\n"
                  "2026-01-01T00:00:01.000Z INFO stopped\n");
    assert_false(pdi_log_has_sanitizer_report(&d));
    d.exit_status = 0;
    assert_int_equal(pdi_daemon_check_exit(&d), 0);
    assert_int_equal(pdi_log_count(&d, "INFO"), 2);

    /* Bad exits: a status of 1, and death by a signal. */
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0)
        _exit(1);
    assert_int_equal(waitpid(pid, &d.exit_status, 0), pid);
    assert_int_equal(pdi_daemon_check_exit(&d), -1);
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        raise(SIGKILL);
        _exit(0);
    }
    assert_int_equal(waitpid(pid, &d.exit_status, 0), pid);
    assert_int_equal(pdi_daemon_check_exit(&d), -1);
    quiet(0);
    unlink(d.log_path);
}

/* The tolerance follows the printed precision of den520d.map.scen (six
 * significant digits): never looser than half a unit in the last digit. */
static void test_scenario_tolerances(void **state)
{
    (void)state;
    pdi_scenario sc[50];
    size_t n = pdi_load_scenarios(sc, 50);
    assert_int_equal(n, 50);
    for (size_t i = 0; i < n; i++) {
        assert_true(sc[i].optimal > 0);
        assert_true(sc[i].tolerance > 1e-9);
        assert_true(sc[i].tolerance <= 0.005 + 1e-9);
        /* The tolerance is meaningfully tight: 6 significant digits. */
        assert_true(sc[i].tolerance <= sc[i].optimal * 1e-5 + 1e-9);
    }
    /* Spread over the file: the last is among the longest. */
    assert_true(sc[n - 1].optimal > 10 * sc[0].optimal);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_sanitizer_reports_are_caught, restore_stderr),
        cmocka_unit_test(test_scenario_tolerances),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
