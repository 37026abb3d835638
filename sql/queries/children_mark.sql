-- children_mark: a parent's wait (`run.step.wait` / `gather`) marks the LIVE ones among the
-- ids it waits for that are its own children (parent_waits, migration 0027) and adds them to
-- its children_waited, in one statement. A child already marked is counted already; a
-- finished one is not marked (its settle has happened). The mark and a child's settle take
-- the child's lock in turn, so each child is either marked before its settle (which then
-- takes it off the count) or found finished by the mark: the count is exactly the marked
-- children still live. The parent reads its children AFTER this (children_read.sql).
-- The mark never waits for a child's lock (`skip locked`): an ack batch locks its rows in
-- whatever order its plan visits them, so waiting could close a circle with it (a deadlock,
-- found only after deadlock_timeout). The live children it skipped (held by a claim or a
-- settle in flight) come back in `busy`, and the driver marks them again a moment later.
-- An id that is not this parent's child (another tenant's job included) marks nothing.
-- It also tallies the ids that are this parent's children: how many, how many live, how many
-- ended dead, failed or cancelled, so a wait with children still live and none ended badly
-- parks without reading a thousand rows (the tally of the round that left none busy).
-- The ids are joined (`wanted`), never tested with `id = any($2)` (children_read.sql says why).
-- $1 parent id  $2 child ids
with wanted as materialized (
  select distinct w.id from unnest($2::text[]) as w(id)
),
candidates as (
  select c.id
    from wanted w
    join x_jobs c on c.id = w.id
   where c.parent_id = $1::text
     and c.state in ('ready', 'delayed', 'running', 'suspended')
     and c.parent_waits is not true
),
locked as (
  select c.id
    from x_jobs c
   where c.id in (select k.id from candidates k)
     and c.state in ('ready', 'delayed', 'running', 'suspended')
     and c.parent_waits is not true
     for update skip locked
),
marked as (
  update x_jobs c
     set parent_waits = true
    from locked l
   where c.id = l.id
  returning c.id
),
counted as (
  update x_jobs p
     set children_waited = coalesce(p.children_waited, 0) + (select count(*) from marked)
   where p.id = $1::text
     and exists (select 1 from marked)
),
tally as (
  select count(*) as found,
         count(*) filter (where c.state in ('ready', 'delayed', 'running', 'suspended')) as live,
         count(*) filter (where c.state in ('dead', 'failed', 'cancelled')) as ended_badly
    from wanted w
    join x_jobs c on c.id = w.id
   where c.parent_id = $1::text
)
select array(select k.id from candidates k where k.id not in (select l.id from locked l)) as busy,
       t.found, t.live, t.ended_badly
  from tally t
