package tool

// EncodeSchema exposes encodeSchema to the package's external tests.
var EncodeSchema = encodeSchema
