// dsinfer router: the prefill/decode coordinator (router/router.h) in front of prefill and decode
// instances, until SIGINT or SIGTERM.
#include <signal.h>

#include <cstdio>
#include <cstdlib>

#include "cli/router_flags.h"
#include "cli/verbs.h"
#include "cli/version.h"
#include "core/log.h"
#include "router/router.h"

namespace dsinfer::cli {

int run_router(int argc, char** argv) {
  std::optional<router::RouterOptions> options = router_options(argc, argv, std::getenv("DSINFER_API_KEY"));
  if (!options) return 0;  // --help
  // SIGINT/SIGTERM are taken by sigwait below; block them before any thread starts.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  size_t prefills = 0, decodes = 0;
  for (const router::WorkerSpec& spec : options->workers)
    ++(spec.role == router::WorkerRole::kPrefill ? prefills : decodes);
  const std::string host = options->http.host;
  router::Router router(std::move(*options));
  router.start();
  std::printf("dsinfer %s (commit %s): routing at http://%s:%u over %zu prefill and %zu decode instances "
              "(GET /metrics for their state)\n",
              kVersion, kCommit, host.c_str(), static_cast<unsigned>(router.port()), prefills, decodes);
  std::fflush(stdout);

  int received = 0;
  sigwait(&signals, &received);
  log_info("signal ", received, ": the router stops; requests in flight are cut");
  router.stop();
  return 0;
}

}  // namespace dsinfer::cli
