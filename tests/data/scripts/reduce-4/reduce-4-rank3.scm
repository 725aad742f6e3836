(script (op reduce) (size 4) (rank 3) (root 2) (level associative) (counts 5)
        (clusters 0 0 1 1) (itemsize 8) (family "hand") (algorithm "two-level")
  (send 2 (from in)))
