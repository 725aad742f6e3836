; Reduce to rank 2 over clusters {0, 1} and {2, 3}, operands kept in rank order.
; Rank 0 coordinates cluster 0: it sums ranks 0..1 and sends the sum across.
(script (op reduce) (size 4) (rank 0) (root 2) (level associative) (counts 5)
        (clusters 0 0 1 1) (itemsize 8) (family "hand") (algorithm "two-level")
  (copy (from in) (into acc))
  (recv-combine 1 (into acc))     ; acc = x0 + x1
  (send 2 (from acc)))            ; the one wide-area message
