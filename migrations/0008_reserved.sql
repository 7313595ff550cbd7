-- 0008: a placeholder on branch log-tree only. Number 0008 belongs to another change being merged
-- in parallel; when that change lands, this file is dropped in favour of its 0008 (migrations must
-- be numbered without gaps, so 0009 needs an 0008 to build on this branch alone).
SELECT 1;
