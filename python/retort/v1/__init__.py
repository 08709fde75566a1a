"""retort.v1: the messages and gRPC stubs generated from proto/retort/v1/retort.proto when the
package is built (retort_pb2, retort_pb2_grpc; never committed). Import them through
retort._stubs, which says how to build them when they are missing."""
