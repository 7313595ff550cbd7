-- 0004: drop the three indexes of 0001 that 0003's (column, seq) indexes superseded. Every list
-- query filters by one of decisions_item_seq, decisions_request_seq, decisions_model_seq or walks
-- seq (time windows map to a seq range through decisions_created_at); none reads these three, and
-- each cost every insert a B-tree update (bench/audit_write: about a fifth of the writer's time).
DROP INDEX decisions_request_id;
DROP INDEX decisions_item_id;
DROP INDEX decisions_model_time;
