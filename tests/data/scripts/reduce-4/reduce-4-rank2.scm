; The root: its own cluster first, then the other cluster's sum on the left.
(script (op reduce) (size 4) (rank 2) (root 2) (level associative) (counts 5)
        (clusters 0 0 1 1) (itemsize 8) (family "hand") (algorithm "two-level")
  (copy (blocks 0) (from in) (into out))
  (recv 3 (into g3))
  (combine (blocks 0) (from g3) (into out))   ; out = x2 + x3
  (recv-combine 0 (side left)))               ; out = (x0 + x1) + (x2 + x3)
