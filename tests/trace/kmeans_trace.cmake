# A traced run of the k-means sample (the README's picture is of such a run): the file must pass the tests'
# structural checks (apgas_trace_check) with every place named and messages between them, and, where Python 3 is
# found, scripts/trace_summary.py must summarise it (without drawing: the tests need no matplotlib).
#   cmake -DKMEANS=<apgas_kmeans> -DCHECK=<apgas_trace_check> -DWORK_DIR=<dir> [-DMPIEXEC=<mpiexec> -DNP=<n>]
#         [-DPYTHON=<python3> -DSUMMARY=<scripts/trace_summary.py>] -P kmeans_trace.cmake
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})
set(trace ${WORK_DIR}/kmeans.json)
set(args -n 20000 -k 24 -i 4 -q --stats)
if(MPIEXEC)
  set(cmd ${MPIEXEC} --allow-run-as-root --oversubscribe -x APGAS_TRACE=${trace} -x APGAS_TRANSPORT=mpi
          -x APGAS_NTHREADS=2 -np ${NP} ${KMEANS} ${args})
  set(places ${NP})
else()
  set(cmd ${CMAKE_COMMAND} -E env APGAS_TRACE=${trace} APGAS_NTHREADS=2 ${KMEANS} ${args})
  set(places 1)
endif()
execute_process(COMMAND ${cmd} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 300)
if(NOT rc EQUAL 0 OR NOT out MATCHES "check=ok")
  message(FATAL_ERROR "the traced k-means run failed (${rc}):\n${out}\n${err}")
endif()
if(NOT err MATCHES "apgas stats: place 0:" OR NOT err MATCHES "apgas: trace: wrote '${trace}'")
  message(FATAL_ERROR "no statistics (--stats) or no trace written:\n${err}")
endif()
set(expect --places ${places} --flows spawn=1 --starts "finish wait=1" --starts team=1)
if(places GREATER 1)
  # Several places: waits poll the transport (poll_until), shown as park spans.
  list(APPEND expect --flows message=1 --starts "waiting (polling)=1")
endif()
execute_process(COMMAND ${CHECK} ${trace} ${expect} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "the k-means trace fails the structural checks:\n${out}")
endif()
message(STATUS "${out}")
if(PYTHON)
  execute_process(COMMAND ${PYTHON} ${SUMMARY} --no-plot ${trace} RESULT_VARIABLE rc OUTPUT_VARIABLE out
                  ERROR_VARIABLE out)
  if(NOT rc EQUAL 0 OR NOT out MATCHES "busiest place: place" OR NOT out MATCHES "idle fraction"
     OR NOT out MATCHES "top activity types")
    message(FATAL_ERROR "trace_summary.py failed (${rc}):\n${out}")
  endif()
  if(places GREATER 1 AND NOT out MATCHES "place 0 -> place 1: [1-9]")
    message(FATAL_ERROR "trace_summary.py shows no messages from place 0 to place 1:\n${out}")
  endif()
  message(STATUS "${out}")
endif()
