"""Facts of the schema that code outside SQL must agree with."""

# memories.embedding and context_embedding are vector(384) (migrations 0001 and 0004): every
# embedding model must give vectors of this size.
VECTOR_DIM = 384
