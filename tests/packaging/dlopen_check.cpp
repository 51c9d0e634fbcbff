// Loads the library named on the command line with dlopen, as Python or a plugin host would (ctest
// apgas.sample.dlopen): libapgas's initial-exec thread-local storage must fit into what glibc keeps for libraries
// loaded after start-up. Linked without libstdc++.so (-static-libstdc++), so that the library brings its own C++
// run-time along, as it does into a C program. Exit 0 and "dlopen ok", or 1 and dlerror().
#include <dlfcn.h>

#include <cstdio>

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: apgas_dlopen_check <library>\n");
    return 2;
  }
  void* lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    std::printf("dlopen failed: %s\n", dlerror());
    return 1;
  }
  std::printf("dlopen ok: %s\n", argv[1]);
  return 0;
}
