-- children_list: the first $2 children of $1 in the order they were enqueued, and how many it
-- has in all (x_jobs_parent_idx): the job page's bounded list with its count.
-- $1 parent id  $2 limit
select j.id, j.name, j.state, x_ms(j.created_at) as created_at_ms,
       count(*) over () as total
  from x_jobs j
 where j.parent_id = $1::text
 order by j.created_at, j.id
 limit $2::int
