"""trio_h2t's HTTP/2 protocol layer, sans-IO."""
