"""The AMQP plumbing, in one home: connecting (``connection``), opening and closing channels (``channels``, with the
aiormq close-ok workaround in ``close_ok``), publishing with confirms (``confirm``, ``confirm_channel``), passive
declares (``probe``), deleting a queue only when it is empty (``queue_delete``), batched acks (``ack_batcher``) and
reading a stream to its end (``stream_read``)."""
