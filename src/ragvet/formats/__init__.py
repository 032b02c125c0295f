"""External formats: BEIR, TREC and SQuAD in; TREC runs and qrels out; production run files."""
