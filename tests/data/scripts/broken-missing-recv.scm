; Well formed, but a wrong plan: rank 1 sends to rank 2, which never receives.
(plan (op bcast) (size 3) (root 0) (counts 1)
  (rank 0 (send 1))
  (rank 1 (recv 0) (send 2))
  (rank 2))
