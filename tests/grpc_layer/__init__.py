"""Tests of trio_h2t.grpc (they mirror trio_h2t/grpc/)."""
