# scripts/trace_summary.py counts every worker as capacity, whether it ran anything or not: two workers, one busy for
# the whole run and one that never ran anything, are 50 % idle (as APGAS_STATS says), with the workers named by
# thread_name metadata or, without it, counted from otherData's places; a track of other threads is no capacity.
#   cmake -DPYTHON=<python3> -DSUMMARY=<scripts/trace_summary.py> -DWORK_DIR=<dir> -P trace_summary_idle.cmake
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})
set(piece [[{"ph":"X","pid":1,"tid":1,"ts":0.0,"dur":1000.0,"name":"spin","cat":"activity"}]])
set(other [[{"ph":"X","pid":1,"tid":3,"ts":0.0,"dur":1000.0,"name":"send","cat":"message"}]])
set(names [[{"ph":"M","pid":1,"tid":0,"ts":0.0,"name":"process_name","args":{"name":"place 0: host h"}},
{"ph":"M","pid":1,"tid":1,"ts":0.0,"name":"thread_name","args":{"name":"worker 0"}},
{"ph":"M","pid":1,"tid":2,"ts":0.0,"name":"thread_name","args":{"name":"worker 1"}},
{"ph":"M","pid":1,"tid":3,"ts":0.0,"name":"thread_name","args":{"name":"other threads"}}]])
set(places [["otherData":{"places":[{"place":0,"workers":2}]}]])
file(WRITE ${WORK_DIR}/named.json "{\"traceEvents\":[${names},${piece},${other}]}\n")
file(WRITE ${WORK_DIR}/counted.json "{\"traceEvents\":[${piece}],${places}}\n")
foreach(name named counted)
  execute_process(COMMAND ${PYTHON} ${SUMMARY} --no-plot ${WORK_DIR}/${name}.json RESULT_VARIABLE rc
                  OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(NOT rc EQUAL 0 OR NOT out MATCHES "idle fraction: 50\\.0 %" OR NOT out MATCHES "busy 1\\.000 ms over 2 tracks")
    message(FATAL_ERROR "${name}: trace_summary.py does not count the idle worker (${rc}):\n${out}")
  endif()
  message(STATUS "${name}:\n${out}")
endforeach()
