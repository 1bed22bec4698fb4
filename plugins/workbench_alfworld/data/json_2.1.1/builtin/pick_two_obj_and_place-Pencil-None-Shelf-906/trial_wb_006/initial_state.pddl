; Hand-written for GenEnv Workbench: a small study, task "put two pencil in shelf".
(define (problem wb_pick_two_obj_pencil_shelf)
  (:domain alfred)
  (:objects
    agent1 - agent
    PencilType - otype
    PenType - otype
    BookType - otype
    ShelfType - rtype
    DrawerType - rtype
    SideTableType - rtype
    DeskType - rtype
    Pencil_bar_01 - object
    Pencil_bar_02 - object
    Pen_bar_01 - object
    Book_bar_01 - object
    Shelf_bar_01 - receptacle
    Drawer_bar_01 - receptacle
    SideTable_bar_01 - receptacle
    Desk_bar_01 - receptacle
    loc_bar_start - location
    loc_bar_01 - location
    loc_bar_02 - location
    loc_bar_03 - location
    loc_bar_04 - location
  )
  (:init
    (atLocation agent1 loc_bar_start)
    (receptacleType Shelf_bar_01 ShelfType)
    (receptacleType Drawer_bar_01 DrawerType)
    (receptacleType SideTable_bar_01 SideTableType)
    (receptacleType Desk_bar_01 DeskType)
    (receptacleAtLocation Shelf_bar_01 loc_bar_01)
    (receptacleAtLocation Drawer_bar_01 loc_bar_02)
    (receptacleAtLocation SideTable_bar_01 loc_bar_03)
    (receptacleAtLocation Desk_bar_01 loc_bar_04)
    (openable Drawer_bar_01)
    (objectType Pencil_bar_01 PencilType)
    (objectType Pencil_bar_02 PencilType)
    (objectType Pen_bar_01 PenType)
    (objectType Book_bar_01 BookType)
    (pickupable Pencil_bar_01)
    (pickupable Pencil_bar_02)
    (pickupable Pen_bar_01)
    (pickupable Book_bar_01)
    (inReceptacle Pencil_bar_01 Drawer_bar_01)
    (inReceptacle Pencil_bar_02 SideTable_bar_01)
    (inReceptacle Pen_bar_01 Desk_bar_01)
    (inReceptacle Book_bar_01 Desk_bar_01)
    (objectAtLocation Pencil_bar_01 loc_bar_02)
    (objectAtLocation Pencil_bar_02 loc_bar_03)
    (objectAtLocation Pen_bar_01 loc_bar_04)
    (objectAtLocation Book_bar_01 loc_bar_04)
    (canContain ShelfType PencilType)
    (canContain ShelfType PenType)
    (canContain ShelfType BookType)
    (canContain DrawerType PencilType)
    (canContain DrawerType PenType)
    (canContain SideTableType PencilType)
    (canContain SideTableType PenType)
    (canContain SideTableType BookType)
    (canContain DeskType PencilType)
    (canContain DeskType PenType)
    (canContain DeskType BookType)
  )
  (:goal
    (and
      (exists (?r - receptacle)
        (exists (?o1 - object)
          (and
            (objectType ?o1 PencilType)
            (receptacleType ?r ShelfType)
            (inReceptacle ?o1 ?r)
            (exists (?o2 - object)
              (and
                (not (= ?o1 ?o2))
                (objectType ?o2 PencilType)
                (receptacleType ?r ShelfType)
                (inReceptacle ?o2 ?r)
              )
            )
          )
        )
      )
    )
  )
)
