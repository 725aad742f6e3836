; DESIGN.md, "A small example": MagPIe's broadcast from rank 1 over two clusters,
; ranks {0, 1, 2} and {3, 4, 5}. Rank 1 coordinates its own cluster, rank 3 the other.
; Blocks are omitted: every step moves all blocks (here the one block 0).
(plan (op bcast) (size 6) (root 1) (counts 1) (clusters 0 0 0 1 1 1) (itemsize 8)
      (family "magpie") (algorithm "coordinator")
  (rank 1 (send 3) (send 0) (send 2))   ; the one wide-area message goes first
  (rank 3 (recv 1) (send 4) (send 5))
  (rank 0 (recv 1)) (rank 2 (recv 1)) (rank 4 (recv 3)) (rank 5 (recv 3)))
