/** Test harness for Taskwright. */
export {}
