// The verbs of the dsinfer binary. Each takes the arguments after its name and returns the exit
// code; errors are thrown as dsinfer::Error and printed by main on one line.
#pragma once

namespace dsinfer::cli {

int run_generate(int argc, char** argv);
int run_tokenize(int argc, char** argv);
int run_serve(int argc, char** argv);
int run_eval(int argc, char** argv);
int run_bench(int argc, char** argv);  // dsinfer bench serve
int run_quantize(int argc, char** argv);
int run_router(int argc, char** argv);  // dsinfer router: the prefill/decode coordinator

}  // namespace dsinfer::cli
