"""DynamoDB Streams: the Streams API front end (ListStreams, DescribeStream, GetShardIterator, GetRecords) over
the stream records the storage engine keeps with every item change."""
