"""Writers: where monitored numbers go (the log table, TensorBoard, ...)."""
