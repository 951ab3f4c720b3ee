"""gRPC servicers and interceptors: translation between protobuf and the domain only."""
