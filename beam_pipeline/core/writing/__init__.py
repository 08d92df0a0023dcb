"""What is written: Examples framed into shards, index files, the tf.Transform graph, embeddings."""
