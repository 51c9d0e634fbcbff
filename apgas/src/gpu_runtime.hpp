#pragma once
// GPU places in the core (gpu.cpp): the accelerator of this process and its part in a run.

namespace apgas {
struct config;
}

namespace apgas::detail {

class accelerator;

/// The accelerator for a run with this configuration: made on first use (make_accelerator), reused while the GPU
/// settings stay the same. Throws config_error (an APGAS_GPUS list naming a GPU the host lacks).
accelerator& accelerator_for_run(const config& cfg);
/// A run begins: this host's GPU places are first_place .. first_place + acc.count() - 1.
void gpu_start(accelerator& acc, int first_place);
/// The run ends (after every activity has ended).
void gpu_stop();

}  // namespace apgas::detail
